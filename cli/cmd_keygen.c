/* planfarm keygen NAME [-d DIR]: a CurveZMQ key pair in CZMQ's zcert format (README
 * "Security"). */
#include "cli/cli.h"
#include "planner/core/util.h"

#include <czmq.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void help(FILE *f)
{
    fprintf(f, "usage: planfarm keygen NAME [-d DIR] [--force]\n\n"
               "Writes a CurveZMQ key pair: DIR/NAME, the public cert (give it to the broker's\n"
               "allow-list, or to clients and workers when NAME is the broker), and\n"
               "DIR/NAME_secret, both keys (mode 0600: it stays with its owner).\n\n"
               "  -d DIR              directory (default .; created if missing)\n"
               "  --force             overwrite an existing pair\n");
}

int cmd_keygen(int argc, char **argv)
{
    enum { O_FORCE = 1 };
    static const struct option opts[] = {{"dir", required_argument, 0, 'd'},
                                         {"force", no_argument, 0, O_FORCE},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *dir = ".";
    int force = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hd:", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case O_FORCE: force = 1; break;
        case 'h': help(stdout); return CLI_OK;
        default: return cli_usage_error("keygen", "unknown option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("keygen", "expected one NAME");
    const char *name = argv[optind];
    if (!name[0] || strchr(name, '/') || name[0] == '.')
        return cli_usage_error("keygen", "NAME '%s': a file name, without '/' or a leading '.'",
                               name);
    char path[400], secret[sizeof path + 8], err[CLI_ERRLEN];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return cli_usage_error("keygen", "path too long");
    snprintf(secret, sizeof secret, "%s_secret", path);
    if (zsys_dir_create("%s", dir) != 0) {
        snprintf(err, sizeof err, "-d %s: cannot create: %s", dir, strerror(errno));
        return cli_report("keygen", PF_ERR, err);
    }
    if (!force && (access(path, F_OK) == 0 || access(secret, F_OK) == 0)) {
        snprintf(err, sizeof err, "%s or %s exists (--force overwrites)", path, secret);
        return cli_report("keygen", PF_EINPUT, err);
    }
    zcert_t *cert = zcert_new();
    if (!cert)
        return cli_report("keygen", PF_ERR, "cannot make a key pair");
    zcert_set_meta(cert, "name", "%s", name);
    zcert_set_meta(cert, "created-by", "planfarm keygen");
    /* the secret file is never readable by others, not even for an instant */
    mode_t old = umask(077);
    const char *failed = zcert_save_secret(cert, secret) != 0 || chmod(secret, 0600) != 0
                             ? secret : NULL;
    umask(old);
    if (!failed && zcert_save_public(cert, path) != 0)
        failed = path;
    if (failed) {
        snprintf(err, sizeof err, "cannot write %s: %s", failed, strerror(errno));
        zcert_destroy(&cert);
        return cli_report("keygen", PF_ERR, err);
    }
    printf("%s\n%s\npublic key %s\n", path, secret, zcert_public_txt(cert));
    zcert_destroy(&cert);
    return CLI_OK;
}
