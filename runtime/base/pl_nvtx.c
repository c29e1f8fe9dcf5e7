/* pl_nvtx: the NVTX domain "pipectl", or nothing when built without NVTX or PIPECTL_NVTX=0. */
#include "pl_nvtx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PL_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

static nvtxDomainHandle_t pl__domain;
static int pl__enabled;
static pthread_once_t pl__once = PTHREAD_ONCE_INIT;

static void pl__nvtx_init(void)
{
    const char *env = getenv("PIPECTL_NVTX");
    pl__enabled = !(env && strcmp(env, "0") == 0);
    if (pl__enabled) pl__domain = nvtxDomainCreateA("pipectl");
}

void pl_nvtx_push(const char *name, int64_t batch)
{
    pthread_once(&pl__once, pl__nvtx_init);
    if (!pl__enabled) return;
    char text[160];
    if (batch >= 0)
        snprintf(text, sizeof text, "%s #%lld", name, (long long)batch);
    else
        snprintf(text, sizeof text, "%s", name);
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text;
    nvtxDomainRangePushEx(pl__domain, &a);
}

void pl_nvtx_pop(void)
{
    if (pl__enabled) nvtxDomainRangePop(pl__domain);
}
#else
void pl_nvtx_push(const char *name, int64_t batch)
{
    (void)name;
    (void)batch;
}

void pl_nvtx_pop(void) {}
#endif
