extension Migration {
    /// Version 19: routing. Teams and their members, which team an app's conversations go to, a
    /// brand's routing settings and agents' own limits, the queue of conversations waiting for an
    /// agent, and how long assigned conversations waited (for the expected wait).
    static let v19 = Migration(
        version: 19, name: "routing",
        statements: [
            """
            CREATE TABLE teams (
                id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL REFERENCES brands(id),
                name TEXT NOT NULL,
                created_at BIGINT NOT NULL,
                UNIQUE (brand_id, name)
            )
            """,
            "CREATE TABLE team_members (team_id TEXT NOT NULL, agent_id TEXT NOT NULL, PRIMARY KEY (team_id, agent_id))",
            "CREATE TABLE app_teams (app_id TEXT PRIMARY KEY, brand_id TEXT NOT NULL, team_id TEXT NOT NULL)",
            """
            CREATE TABLE routing_settings (
                brand_id TEXT PRIMARY KEY,
                mode TEXT NOT NULL,
                max_conversations INTEGER NOT NULL,
                requeue_grace_seconds INTEGER NOT NULL
            )
            """,
            "CREATE TABLE agent_capacity (agent_id TEXT PRIMARY KEY, brand_id TEXT NOT NULL, max_conversations INTEGER NOT NULL)",
            """
            CREATE TABLE conversation_queue (
                conversation_id TEXT PRIMARY KEY,
                brand_id TEXT NOT NULL,
                team_id TEXT,
                priority INTEGER NOT NULL,
                queued_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX conversation_queue_order ON conversation_queue (brand_id, priority, queued_at)",
            """
            CREATE TABLE routing_waits (
                conversation_id TEXT NOT NULL,
                brand_id TEXT NOT NULL,
                team_id TEXT,
                queued_at BIGINT NOT NULL,
                assigned_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX routing_waits_recent ON routing_waits (brand_id, assigned_at)",
            // Open conversations nobody has wait from when they began.
            """
            INSERT INTO conversation_queue (conversation_id, brand_id, team_id, priority, queued_at)
            SELECT id, brand_id, NULL, 0, created_at FROM conversations WHERE assignee_id IS NULL AND state <> 'resolved'
            """,
        ])
}
