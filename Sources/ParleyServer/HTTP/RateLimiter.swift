import Foundation
import ParleyDomain
import Synchronization

/// Where token buckets are kept: `limit` actions per `period` for each key, refilled continuously,
/// so a burst of up to `limit` is allowed and then one action every `period / limit`. In this
/// process (`LocalTokenBuckets`), or in a store every node shares, so that a client cannot multiply
/// a limit by the number of nodes.
public protocol TokenBuckets: Sendable {
    /// Takes one token from `key`'s bucket. Returns nil when allowed, else the whole seconds until it would be.
    func take(_ key: String, limit: Int, per period: Duration) async throws -> Int?
}

/// Token buckets in this process's memory, bounded (idle full buckets are dropped past 100,000).
public final class LocalTokenBuckets: TokenBuckets {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    /// The time buckets refill by: the machine's monotonic clock, or one a test moves.
    private let clock: @Sendable () -> ContinuousClock.Instant
    private let buckets = Mutex<[String: Bucket]>([:])
    /// Buckets kept before full (idle) ones are dropped.
    private static let maxBuckets = 100_000

    public init(clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.clock = clock
    }

    public func take(_ key: String, limit: Int, per period: Duration) async throws -> Int? {
        take(key, limit: limit, per: period, now: clock())
    }

    public func take(_ key: String, limit: Int, per period: Duration, now: ContinuousClock.Instant) -> Int? {
        guard limit > 0 else { return nil }
        let rate = Double(limit) / max(period.seconds, 0.001)
        let capacity = Double(limit)
        return buckets.withLock { buckets -> Int? in
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: now)
            let elapsed = now - bucket.updated
            bucket.tokens = min(capacity, bucket.tokens + elapsed.seconds * rate)
            bucket.updated = now
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                buckets[key] = bucket
                if buckets.count > Self.maxBuckets { Self.dropIdle(&buckets, capacity: capacity, rate: rate, now: now) }
                return nil
            }
            buckets[key] = bucket
            return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
        }
    }

    private static func dropIdle(_ buckets: inout [String: Bucket], capacity: Double, rate: Double, now: ContinuousClock.Instant) {
        buckets = buckets.filter { _, bucket in
            let elapsed = now - bucket.updated
            let seconds = Double(elapsed.components.seconds)
            return bucket.tokens + seconds * rate < capacity
        }
    }
}

/// One limit: `limit` actions per `period` for each key, kept in `buckets`.
public struct RateLimiter: Sendable {
    public let name: String
    public let limit: Int
    public let period: Duration
    let buckets: any TokenBuckets

    /// `limit == 0` turns the limiter off.
    public init(name: String, limit: Int, per period: Duration, buckets: any TokenBuckets) {
        (self.name, self.limit, self.period, self.buckets) = (name, limit, period, buckets)
    }

    /// Takes one token for `key`. Returns nil when allowed, else the whole seconds until it would be.
    /// A shared store that cannot be reached lets the action through (logged by the store): a limit
    /// is a defence, and an outage of its store must not stop every customer from writing.
    public func take(_ key: String) async -> Int? {
        guard limit > 0 else { return nil }
        return (try? await buckets.take("\(name):\(key)", limit: limit, per: period)) ?? nil
    }

    /// Throws `rate_limited` (429, with Retry-After) when `key` has no token left.
    public func check(_ key: String, _ what: String) async throws(ParleyError) {
        if let wait = await take(key) {
            throw ParleyError.rateLimited(what, retryAfter: wait)
        }
    }
}

/// Every limit the server enforces. A limit of 0 is off.
public struct RateLimits: Sendable {
    /// Messages (text or voice) one consumer may send.
    public let consumerMessages: RateLimiter
    /// Activity batches one consumer may report.
    public let consumerActivity: RateLimiter
    /// Push registrations one consumer may make (each a device's token).
    public let pushRegistrations: RateLimiter
    /// Consumer writes (messages, uploads, new sessions) from one IP address.
    public let ipWrites: RateLimiter
    /// New anonymous consumer sessions from one IP address.
    public let consumerSessions: RateLimiter
    /// Sign-in attempts from one IP address.
    public let loginsPerIP: RateLimiter
    /// Sign-in attempts for one email address.
    public let loginsPerEmail: RateLimiter
    /// Senders recently closed with 4008 for flooding the real-time API.
    let floods: FloodCooldown

    /// The one rule for messages: a consumer's message (text or voice, over HTTP or real time)
    /// counts against that consumer's limit and the address's write limit. Agents are not limited here.
    func admitMessage(from principal: Principal, address: String?) async throws(ParleyError) {
        guard case .consumer(let consumer) = principal else { return }
        try await consumerMessages.check(consumer.consumerId.rawValue, "messages")
        if let address { try await ipWrites.check(address, "requests from this address") }
    }

    /// `clock` is the service's: buckets refill on the machine's monotonic clock, or, when a test
    /// injected a clock of its own, as that clock moves (a test of a limit never races real time).
    /// Each limit keeps its buckets in this process, or, on several nodes, in `shared` (every
    /// limit here is per client, which may reach any node). Per-connection budgets (frames, typing)
    /// stay with their connection (`FrameLimiter`).
    public init(_ configuration: ParleyConfiguration, clock: any WallClock = SystemClock(), shared: (any TokenBuckets)? = nil) {
        let now: @Sendable () -> ContinuousClock.Instant
        if clock is SystemClock {
            now = { .now }
        } else {
            let (base, start) = (ContinuousClock.now, clock.now())
            now = { base.advanced(by: .milliseconds(Int64(clock.now().timeIntervalSince(start) * 1000))) }
        }
        floods = FloodCooldown(duration: .seconds(configuration.realtimeFloodCooldownSeconds))
        consumerMessages = RateLimiter(name: "consumer messages", limit: configuration.rateConsumerMessages, per: .seconds(60), buckets: shared ?? LocalTokenBuckets(clock: now))
        consumerActivity = RateLimiter(name: "consumer activity", limit: configuration.rateConsumerActivity, per: .seconds(60), buckets: shared ?? LocalTokenBuckets(clock: now))
        pushRegistrations = RateLimiter(name: "push registrations", limit: configuration.rateConsumerPush, per: .seconds(60), buckets: shared ?? LocalTokenBuckets(clock: now))
        ipWrites = RateLimiter(name: "writes per IP", limit: configuration.rateIPWrites, per: .seconds(60), buckets: shared ?? LocalTokenBuckets(clock: now))
        consumerSessions = RateLimiter(name: "consumer sessions per IP", limit: configuration.rateConsumerSessions, per: .seconds(60), buckets: shared ?? LocalTokenBuckets(clock: now))
        loginsPerIP = RateLimiter(name: "sign-ins per IP", limit: configuration.rateLogins, per: .seconds(60), buckets: shared ?? LocalTokenBuckets(clock: now))
        loginsPerEmail = RateLimiter(name: "sign-ins per email", limit: max(0, configuration.rateLogins / 2), per: .seconds(300), buckets: shared ?? LocalTokenBuckets(clock: now))
    }
}
