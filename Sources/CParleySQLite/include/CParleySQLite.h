#ifndef CPARLEYSQLITE_H
#define CPARLEYSQLITE_H

/// Registers the "parley-wal" VFS (once; later calls do nothing) over the default one and returns
/// its name, or NULL if SQLite has no default VFS. See wal_writes.c.
const char *parley_wal_writes_vfs(void);

/// For WAL files opened through the VFS: how many writes SQLite asked for, how many reached the file
/// system, and how many of those went over frames already written (a rewrite in place). For tests.
void parley_wal_writes_counts(long long *sqliteWrites, long long *fileWrites, long long *overwrites);

#endif
