/* pl_sha256: SHA-256 through libcrypto's EVP interface (not hand-written crypto: docs/bundles.md
 * says why). */
#include "pl_sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

static void pl__hex(const unsigned char *md, char hex[PL_SHA256_HEX])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

pl_status pl_sha256(const void *data, size_t len, char hex[PL_SHA256_HEX], pl_error *err)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return pl_error_set(err, PL_ERUNTIME, "error: SHA-256 failed (libcrypto)");
    pl__hex(md, hex);
    return PL_OK;
}

pl_status pl_sha256_fd(int fd, const char *name, char hex[PL_SHA256_HEX], unsigned long long *bytes,
                       pl_error *err)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    pl_status st = PL_OK;
    unsigned long long total = 0;
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        st = pl_error_set(err, PL_ERUNTIME, "error: SHA-256 failed (libcrypto)");
        goto done;
    }
    unsigned char buf[1 << 16];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = pl_error_set(err, PL_EIO, "error: cannot read %s: %s", name, strerror(errno));
            goto done;
        }
        if (n == 0) break;
        total += (unsigned long long)n;
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
            st = pl_error_set(err, PL_ERUNTIME, "error: SHA-256 failed (libcrypto)");
            goto done;
        }
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdn = 0;
    if (EVP_DigestFinal_ex(ctx, md, &mdn) != 1 || mdn != 32) {
        st = pl_error_set(err, PL_ERUNTIME, "error: SHA-256 failed (libcrypto)");
        goto done;
    }
    pl__hex(md, hex);
    if (bytes) *bytes = total;
done:
    EVP_MD_CTX_free(ctx);
    return st;
}

pl_status pl_sha256_file(const char *path, char hex[PL_SHA256_HEX], unsigned long long *bytes,
                         pl_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pl_error_set(err, PL_EIO, "error: cannot read %s: %s", path, strerror(errno));
    pl_status st = pl_sha256_fd(fd, path, hex, bytes, err);
    close(fd);
    return st;
}
