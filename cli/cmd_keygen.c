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

typedef struct {
    const char *dir;
    bool force;
} keygen_args_t;

static const cli_option_t keygen_options[] = {
    {"dir", 'd', CLI_OPT_STRING, .offset = offsetof(keygen_args_t, dir)},
    {"force", 0, CLI_OPT_FLAG, .offset = offsetof(keygen_args_t, force)},
    CLI_OPTION_HELP,
    CLI_OPTION_END,
};

int cmd_keygen(int argc, char **argv)
{
    keygen_args_t a = {".", false};
    const cli_options_t spec = {"keygen", help, NULL, NULL,
                                {{keygen_options, &a, NULL}, {NULL, NULL, NULL}}};
    int status, first = cli_options_parse(&spec, argc, argv, &status);
    if (first < 0)
        return status;
    if (argc - first != 1)
        return cli_usage_error("keygen", "expected one NAME");
    const char *name = argv[first], *dir = a.dir;
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
    if (!a.force && (access(path, F_OK) == 0 || access(secret, F_OK) == 0)) {
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
