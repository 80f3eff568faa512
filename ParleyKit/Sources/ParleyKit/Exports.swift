/// An app writes `import ParleyKit` and names the wire types the SDK's API speaks in (`BrandID`,
/// `MessageDTO`, `ErrorCode`...) without importing their module too.
@_exported import ParleyAPI
