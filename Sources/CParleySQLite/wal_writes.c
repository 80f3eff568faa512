// A VFS over SQLite's own ("unix") that gathers a commit's WAL writes into one write.
//
// SQLite writes each WAL frame with two calls, its 24-byte header and then its page
// (walWriteOneFrame), so a message's commit, some ten pages, is some twenty pwrite calls, and
// on ext4 every one of them runs the page cache's write_begin/write_end for each 4 KB folio it
// touches (a 4,120-byte frame straddles two). No SQLite setting or listed package gathers them,
// hence this file: SQLite's documented VFS interface (https://sqlite.org/vfs.html), forwarding
// everything to the default VFS and keeping back only appends to a WAL file.
//
// What is kept back reaches the file before anybody can need it:
// - a commit frame (a header whose "database size after commit" is not 0) goes out with its page,
//   before sqlite3WalFrames publishes the commit in the wal-index, so no reader or checkpointer
//   (their own file handles) is ever told of a frame that is not in the file, and an error is
//   SQLite's error from that write, as before; this holds however the header itself was written
//   (kept back, or straight to the file as a handle's first write);
// - any other call on the file (read, sync, truncate, size, locks, file controls, close) first
//   writes what is kept;
// - a write that is not an append (a frame rewritten in place, the checksums rewritten at the end
//   of a transaction that overwrote its own frames, the WAL header when the log starts again) first
//   writes what is kept, then goes straight to the file;
// - at most kBufferLimit bytes are kept (a large transaction's frames go out in pieces).
// Crash behaviour is unchanged: nothing kept back belongs to a commit that has returned.
#include "CParleySQLite.h"
#include "sqlite_nio_sqlite3.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

// 64 KB: the unix VFS writes at most 0x1ffff bytes in one call (seekAndWriteFd masks the length
// with it, and a masked length that comes out short is reported as SQLITE_FULL).
enum { kBufferLimit = 64 * 1024, kFrameHeader = 24, kWalHeader = 32 };

typedef struct GatherFile {
    sqlite3_file base;     // pMethods: gatherMethods
    sqlite3_file *real;    // the default VFS's file, in the bytes right after this struct
    int isWal;
    unsigned char *buffer; // appends kept back, starting at `start`
    int length;
    sqlite3_int64 start;
    sqlite3_int64 end;     // the end of what this handle has written or kept since the log started
    int commitPending;     // a commit frame's header was just written: its page, the next write, completes the commit
} GatherFile;

static sqlite3_vfs *underlying;
static sqlite3_vfs gatherVFS;
static atomic_llong sqliteWrites, fileWrites, overwrites;

static int flush(GatherFile *file) {
    if (file->length == 0) return SQLITE_OK;
    int length = file->length;
    file->length = 0;
    atomic_fetch_add_explicit(&fileWrites, 1, memory_order_relaxed);
    return file->real->pMethods->xWrite(file->real, file->buffer, length, file->start);
}

#define REAL(f) (((GatherFile *)(f))->real)
#define FLUSHED(f)                                       \
    do {                                                 \
        int flushed = flush((GatherFile *)(f));          \
        if (flushed != SQLITE_OK) return flushed;        \
    } while (0)

static int gatherClose(sqlite3_file *f) {
    GatherFile *file = (GatherFile *)f;
    int rc = flush(file);
    int closed = file->real->pMethods->xClose(file->real);
    free(file->buffer);
    file->buffer = NULL;
    return rc != SQLITE_OK ? rc : closed;
}

static int gatherRead(sqlite3_file *f, void *out, int amount, sqlite3_int64 offset) {
    FLUSHED(f);
    return REAL(f)->pMethods->xRead(REAL(f), out, amount, offset);
}

// A frame header (24 bytes, after the WAL's own 32) whose bytes 4-7, the database's size in pages
// after a commit, are not 0: the last frame of a commit.
static int isCommitHeader(const void *data, int amount, sqlite3_int64 offset) {
    if (amount != kFrameHeader || offset < kWalHeader) return 0;
    const unsigned char *header = data;
    return (header[4] | header[5] | header[6] | header[7]) != 0;
}

static int writeThrough(GatherFile *file, const void *data, int amount, sqlite3_int64 offset) {
    atomic_fetch_add_explicit(&fileWrites, 1, memory_order_relaxed);
    return file->real->pMethods->xWrite(file->real, data, amount, offset);
}

static int gatherWrite(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    GatherFile *file = (GatherFile *)f;
    if (!file->isWal) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    atomic_fetch_add_explicit(&sqliteWrites, 1, memory_order_relaxed);
    if (offset == 0) {
        // The WAL header: the log starts again from here.
        FLUSHED(file);
        file->end = amount;
        file->commitPending = 0;
        return writeThrough(file, data, amount, offset);
    }
    if (offset != file->end || amount > kBufferLimit) {
        // Not an append (or too large to keep): what is kept goes first, then this.
        FLUSHED(file);
        if (offset < file->end) atomic_fetch_add_explicit(&overwrites, 1, memory_order_relaxed);
        if (offset + amount > file->end) file->end = offset + amount;
        // A commit frame's header written here (the first write of a handle, whose `end` was not
        // where the log ends) still has its page to come, as an append: that write flushes.
        file->commitPending = isCommitHeader(data, amount, offset);
        return writeThrough(file, data, amount, offset);
    }
    if (file->length > 0 && file->length + amount > kBufferLimit) FLUSHED(file);
    if (file->buffer == NULL) {
        file->buffer = malloc(kBufferLimit);
        if (file->buffer == NULL) {
            file->end = offset + amount;
            file->commitPending = isCommitHeader(data, amount, offset);
            return writeThrough(file, data, amount, offset);
        }
    }
    if (file->length == 0) file->start = offset;
    memcpy(file->buffer + file->length, data, (size_t)amount);
    file->length += amount;
    file->end = offset + amount;
    if (amount == kFrameHeader && offset >= kWalHeader) {
        file->commitPending = isCommitHeader(data, amount, offset);
        return SQLITE_OK;
    }
    if (file->commitPending) {
        file->commitPending = 0;
        return flush(file);
    }
    return SQLITE_OK;
}

static int gatherTruncate(sqlite3_file *f, sqlite3_int64 size) {
    FLUSHED(f);
    GatherFile *file = (GatherFile *)f;
    if (file->end > size) file->end = size;
    return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int gatherSync(sqlite3_file *f, int flags) {
    FLUSHED(f);
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int gatherFileSize(sqlite3_file *f, sqlite3_int64 *size) {
    FLUSHED(f);
    return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int gatherLock(sqlite3_file *f, int level) {
    FLUSHED(f);
    return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int gatherUnlock(sqlite3_file *f, int level) {
    FLUSHED(f);
    return REAL(f)->pMethods->xUnlock(REAL(f), level);
}

static int gatherCheckReservedLock(sqlite3_file *f, int *out) {
    FLUSHED(f);
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int gatherFileControl(sqlite3_file *f, int op, void *arg) {
    FLUSHED(f);
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int gatherSectorSize(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }

static int gatherDeviceCharacteristics(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }

static int gatherShmMap(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    FLUSHED(f);
    if (REAL(f)->pMethods->iVersion < 2) return SQLITE_IOERR;
    return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}

static int gatherShmLock(sqlite3_file *f, int offset, int n, int flags) {
    FLUSHED(f);
    if (REAL(f)->pMethods->iVersion < 2) return SQLITE_IOERR;
    return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void gatherShmBarrier(sqlite3_file *f) {
    (void)flush((GatherFile *)f);  // never kept on a database file, which is where SQLite calls this
    if (REAL(f)->pMethods->iVersion >= 2) REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int gatherShmUnmap(sqlite3_file *f, int deleteFlag) {
    FLUSHED(f);
    if (REAL(f)->pMethods->iVersion < 2) return SQLITE_OK;
    return REAL(f)->pMethods->xShmUnmap(REAL(f), deleteFlag);
}

static int gatherFetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    FLUSHED(f);
    if (REAL(f)->pMethods->iVersion < 3) {
        *out = NULL;
        return SQLITE_OK;
    }
    return REAL(f)->pMethods->xFetch(REAL(f), offset, amount, out);
}

static int gatherUnfetch(sqlite3_file *f, sqlite3_int64 offset, void *pointer) {
    if (REAL(f)->pMethods->iVersion < 3) return SQLITE_OK;
    return REAL(f)->pMethods->xUnfetch(REAL(f), offset, pointer);
}

static const sqlite3_io_methods gatherMethods = {
    3,
    gatherClose,
    gatherRead,
    gatherWrite,
    gatherTruncate,
    gatherSync,
    gatherFileSize,
    gatherLock,
    gatherUnlock,
    gatherCheckReservedLock,
    gatherFileControl,
    gatherSectorSize,
    gatherDeviceCharacteristics,
    gatherShmMap,
    gatherShmLock,
    gatherShmBarrier,
    gatherShmUnmap,
    gatherFetch,
    gatherUnfetch,
};

static int gatherOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *outFlags) {
    (void)vfs;
    GatherFile *file = (GatherFile *)f;
    memset(file, 0, sizeof(GatherFile));
    file->real = (sqlite3_file *)(file + 1);
    file->isWal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = underlying->xOpen(underlying, name, file->real, flags, outFlags);
    // SQLite closes a file only when its pMethods is set.
    file->base.pMethods = file->real->pMethods != NULL ? &gatherMethods : NULL;
    return rc;
}

static int gatherDelete(sqlite3_vfs *v, const char *name, int syncDir) { (void)v; return underlying->xDelete(underlying, name, syncDir); }
static int gatherAccess(sqlite3_vfs *v, const char *name, int flags, int *out) { (void)v; return underlying->xAccess(underlying, name, flags, out); }
static int gatherFullPathname(sqlite3_vfs *v, const char *name, int n, char *out) {
    (void)v;
    return underlying->xFullPathname(underlying, name, n, out);
}
static void *gatherDlOpen(sqlite3_vfs *v, const char *name) { (void)v; return underlying->xDlOpen(underlying, name); }
static void gatherDlError(sqlite3_vfs *v, int n, char *out) { (void)v; underlying->xDlError(underlying, n, out); }
static void (*gatherDlSym(sqlite3_vfs *v, void *handle, const char *symbol))(void) {
    (void)v;
    return underlying->xDlSym(underlying, handle, symbol);
}
static void gatherDlClose(sqlite3_vfs *v, void *handle) { (void)v; underlying->xDlClose(underlying, handle); }
static int gatherRandomness(sqlite3_vfs *v, int n, char *out) { (void)v; return underlying->xRandomness(underlying, n, out); }
static int gatherSleep(sqlite3_vfs *v, int microseconds) { (void)v; return underlying->xSleep(underlying, microseconds); }
static int gatherCurrentTime(sqlite3_vfs *v, double *out) { (void)v; return underlying->xCurrentTime(underlying, out); }
static int gatherGetLastError(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return underlying->xGetLastError ? underlying->xGetLastError(underlying, n, out) : 0;
}
static int gatherCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *out) {
    (void)v;
    return underlying->xCurrentTimeInt64(underlying, out);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void registerOnce(void) {
    underlying = sqlite_nio_sqlite3_vfs_find(NULL);
    if (underlying == NULL || underlying->iVersion < 2) {
        underlying = NULL;
        return;
    }
    gatherVFS = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(GatherFile) + underlying->szOsFile,
        .mxPathname = underlying->mxPathname,
        .zName = "parley-wal",
        .xOpen = gatherOpen,
        .xDelete = gatherDelete,
        .xAccess = gatherAccess,
        .xFullPathname = gatherFullPathname,
        .xDlOpen = gatherDlOpen,
        .xDlError = gatherDlError,
        .xDlSym = gatherDlSym,
        .xDlClose = gatherDlClose,
        .xRandomness = gatherRandomness,
        .xSleep = gatherSleep,
        .xCurrentTime = gatherCurrentTime,
        .xGetLastError = gatherGetLastError,
        .xCurrentTimeInt64 = gatherCurrentTimeInt64,
    };
    if (sqlite_nio_sqlite3_vfs_register(&gatherVFS, 0) != SQLITE_OK) underlying = NULL;
}

const char *parley_wal_writes_vfs(void) {
    pthread_once(&once, registerOnce);
    return underlying != NULL ? gatherVFS.zName : NULL;
}

void parley_wal_writes_counts(long long *sqlite, long long *file, long long *overwritten) {
    *sqlite = atomic_load_explicit(&sqliteWrites, memory_order_relaxed);
    *file = atomic_load_explicit(&fileWrites, memory_order_relaxed);
    *overwritten = atomic_load_explicit(&overwrites, memory_order_relaxed);
}
