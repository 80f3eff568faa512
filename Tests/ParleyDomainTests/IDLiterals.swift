import ParleyAPI

/// In tests only: ids written as literals (`"cnv_x"`). Production code has no literal ids, and
/// `ConversationID("...")` there is the checked initializer.
extension ID: @retroactive ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self.init(rawValue: value) }
}
