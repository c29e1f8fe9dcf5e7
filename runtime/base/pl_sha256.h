/* pl_sha256: SHA-256 (FIPS 180-4) of memory and files, as lowercase hex, through OpenSSL's
 * libcrypto (EVP): bundles hash every input, output and bundled file with it. */
#ifndef PL_SHA256_H
#define PL_SHA256_H

#include <stddef.h>

#include "pl_status.h"

#define PL_SHA256_HEX 65 /* 64 hex digits and a NUL */

/* hex gets the digest of `len` bytes at `data`. PL_ERUNTIME only if libcrypto fails. */
pl_status pl_sha256(const void *data, size_t len, char hex[PL_SHA256_HEX], pl_error *err);
/* The digest of the file at `path` (read in chunks); *bytes gets its size (may be NULL). PL_EIO
 * names the file when it cannot be read. */
pl_status pl_sha256_file(const char *path, char hex[PL_SHA256_HEX], unsigned long long *bytes,
                         pl_error *err);
/* The same of what is left to read from the open descriptor fd (not closed); `name` names it in
 * messages. Bundles open their files without following links, then hash the descriptor. */
pl_status pl_sha256_fd(int fd, const char *name, char hex[PL_SHA256_HEX], unsigned long long *bytes,
                       pl_error *err);

#endif
