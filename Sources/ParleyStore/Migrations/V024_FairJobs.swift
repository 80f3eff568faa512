extension Migration {
    /// Version 24: jobs are claimed brand by brand (one brand's backlog never delays another's), so
    /// each brand's due jobs are found through an index of their own.
    static let v24 = Migration(
        version: 24, name: "fair jobs",
        statements: [
            "CREATE INDEX jobs_brand_due ON jobs (brand_id, state, run_at)",
        ])
}
