/* seccomp_run NUMBERS_FILE CMD [ARGS...]: runs CMD under a seccomp filter that allows only the
 * system call numbers listed in NUMBERS_FILE (one per line) and kills the process on any other,
 * as systemd's SystemCallFilter= allow-list does (deploy/check.sh builds the list from the
 * unit's filter lines with systemd-analyze; "Bad system call", exit status 159, is the death).
 * x86_64 only: another architecture is refused, so the check is skipped there. */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MAX_CALLS 1024

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: seccomp_run NUMBERS_FILE CMD [ARGS...]\n");
        return 2;
    }
#ifndef __x86_64__
    fprintf(stderr, "seccomp_run: x86_64 only\n");
    return 3;
#else
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    static struct sock_filter prog[MAX_CALLS * 2 + 8];
    int n = 0, nr, ncalls = 0;
    /* the architecture first: a call through another ABI is killed */
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                             offsetof(struct seccomp_data, arch));
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                             offsetof(struct seccomp_data, nr));
    while (ncalls < MAX_CALLS && fscanf(f, "%d", &nr) == 1) {
        prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1);
        prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        ncalls++;
    }
    fclose(f);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    struct sock_fprog fprog = {(unsigned short)n, prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
        perror("seccomp_run: prctl");
        return 2;
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
#endif
}
