extension Migration {
    /// Version 31: co-browse control. Whether the agent may click and type on the customer's page
    /// (`none`, `requested`, `granted`), and when the customer first allowed it (the record keeps it).
    /// And the nodes of the session's two connections, so that on several nodes a node that is
    /// gone (killed) does not leave its sessions open.
    static let v31 = Migration(
        version: 31, name: "cobrowse_control",
        statements: [
            "ALTER TABLE cobrowse_sessions ADD COLUMN control TEXT NOT NULL DEFAULT 'none'",
            "ALTER TABLE cobrowse_sessions ADD COLUMN control_granted_at BIGINT",
            "ALTER TABLE cobrowse_sessions ADD COLUMN agent_node TEXT",
            "ALTER TABLE cobrowse_sessions ADD COLUMN consumer_node TEXT",
        ])
}
