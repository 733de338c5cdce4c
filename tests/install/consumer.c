/*
 * A program outside the chainrules tree: built against an installed chainrules through
 * pkg-config and through find_package(chainrules CONFIG), by tests/install/check.sh.
 */
#include <chainrules.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    const char *name = cr_status_name(CR_ENOMEM);
    if (CR_VERSION_NUMBER != cr_version_number()) {
        fprintf(stderr, "consumer: header version %d, library version %d\n", CR_VERSION_NUMBER,
                cr_version_number());
        return 1;
    }
    if (strcmp(name, "CR_ENOMEM") != 0) {
        fprintf(stderr, "consumer: cr_status_name(CR_ENOMEM) = \"%s\"\n", name);
        return 1;
    }
    printf("consumer: chainrules %s (%d), %s\n", CR_VERSION_STRING, cr_version_number(), name);
    return 0;
}
