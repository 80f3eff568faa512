extension Migration {
    /// Version 26: the node that holds each live call (`CallService`, several nodes). Another node
    /// forwards the call's frames there, and ends the record when that node has gone.
    static let v26 = Migration(
        version: 26, name: "call_nodes",
        statements: [
            "ALTER TABLE calls ADD COLUMN node TEXT",
        ])
}
