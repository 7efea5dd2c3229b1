/* record: the agent's side of the measurement records (planner/inputs/record.h): who took a
 * measurement and when. */
#ifndef PF_RECORD_H
#define PF_RECORD_H

#include "planner/inputs/record.h"

/* Fill the bookkeeping fields: measured_by = this host's name, when = now. */
void pf_record_stamp(char measured_by[PF_REC_NAME], double *when_unix_s);

#endif
