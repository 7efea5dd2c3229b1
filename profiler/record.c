#include "profiler/record.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

void pf_record_stamp(char measured_by[PF_REC_NAME], double *when_unix_s)
{
    char host[256] = "localhost";
    struct timespec ts;
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    pf_record_name(measured_by, host);
    clock_gettime(CLOCK_REALTIME, &ts);
    *when_unix_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
