/* SPDX-License-Identifier: Apache-2.0 */
/* The layer unpacker on in-memory archives (tar, gzip, zstd), rootless rules, into a fresh
 * directory: no crash, and nothing ever appears beside that directory. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "image/unpack.h"
#include "util/path.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[] = "/tmp/nook-fuzz-unpack-XXXXXX";

/* The run's directory is empty between inputs ("layer" is removed after each): it goes at exit,
 * where libFuzzer ends a run that found nothing (-max_total_time, -runs). */
static void base_remove(void) {
        (void)rmdir(base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static int base_fd = -1;
        unpack_opts o = { .rootless = true };
        char diff[IMAGE_DIGEST_LEN + 1];
        nook_error err = {};
        if (base_fd < 0 &&
                (!mkdtemp(base) || (base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0))
                abort();
        static bool cleanup_registered;
        if (!cleanup_registered) {
                cleanup_registered = true;
                (void)atexit(base_remove);
        }
        if (mkdirat(base_fd, "layer", 0700) < 0)
                abort();
        int fd = openat(base_fd, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        (void)image_unpack_mem(data, size, fd, &o, diff, &err);
        close(fd);
        if (path_rm_rf_at(base_fd, "layer", &err) < 0 || faccessat(base_fd, "layer", F_OK, 0) == 0)
                abort();
        return 0;
}
