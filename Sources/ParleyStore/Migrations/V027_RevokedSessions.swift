extension Migration {
    /// Version 27: finding the sessions revoked lately (`SessionRevocations`: every process ends the
    /// open connections of sessions another process revoked, `parley admin` or another node).
    static let v27 = Migration(
        version: 27, name: "revoked_sessions",
        statements: [
            "CREATE INDEX sessions_revoked ON sessions (revoked_at) WHERE revoked_at IS NOT NULL",
        ])
}
