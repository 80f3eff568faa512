import Foundation
import ParleyAPI

/// Something the consumer did in the app, for the brand: agents see a consumer's recent activity
/// beside the conversation, and the brand's engagement rules can answer it (an automatic message,
/// or a `.prompt` event for the app to show).
public struct Activity: Sendable, Hashable {
    public let name: String
    public let properties: [String: ActivityValue]

    /// An event of the brand's own: a name of letters, digits, `_`, `.`, `-` and `:` (at most 64),
    /// and at most 20 properties.
    public init(_ name: String, _ properties: [String: ActivityValue] = [:]) {
        self.name = name
        self.properties = properties
    }

    /// The consumer opened a screen of the app.
    public static func screenView(_ screen: String) -> Activity {
        Activity("screen_view", ["screen": .string(screen)])
    }

    /// What is in the consumer's cart now.
    public static func cartValue(_ value: Double, currency: String? = nil) -> Activity {
        var properties: [String: ActivityValue] = ["value": .number(value)]
        if let currency { properties["currency"] = .string(currency) }
        return Activity("cart_value", properties)
    }

    public static func custom(_ name: String, _ properties: [String: ActivityValue] = [:]) -> Activity {
        Activity(name, properties)
    }
}

extension Parley {
    /// Events kept on the device while they cannot be sent; the oldest go first beyond this.
    static let maxQueuedActivity = 1000
    /// Events per request.
    static let activityBatch = 50

    /// Reports what the consumer did:
    ///
    /// ```swift
    /// try await parley.report(.screenView("checkout"), .cartValue(129.90, currency: "EUR"))
    /// ```
    ///
    /// The events are stored (sealed) at once and sent in batches with the outbox: now when
    /// `start()` runs, else at the next `flush()`; kept while offline, each sent once.
    public func report(_ activities: Activity...) throws {
        try report(activities)
    }

    public func report(_ activities: [Activity]) throws {
        for activity in activities {
            if let problem = ActivityEventInput.problem(name: activity.name, properties: activity.properties) {
                throw ParleyKitError.invalid(problem.message)
            }
        }
        let now = Date()
        activity.append(contentsOf: activities.map {
            ActivityEventInput(clientEventId: UUID().uuidString, name: $0.name, properties: $0.properties, occurredAt: now)
        })
        if activity.count > Self.maxQueuedActivity { activity.removeFirst(activity.count - Self.maxQueuedActivity) }
        try store.write(Self.activityFile, activity)
        if loopRunning { wakeLoop() }
    }

    /// Sends what was reported, in batches; returns whether some is still waiting (the network or
    /// the server failed). A batch the server refuses is dropped: it would be refused again.
    func flushActivity() async -> Bool {
        while !activity.isEmpty {
            let batch = Array(activity.prefix(Self.activityBatch))
            do {
                try await ensureSession()
                let response = try await client.reportActivity(batch)
                for prompt in response.prompts { emit(.prompt(prompt)) }
            } catch {
                switch SendFailure(error) {
                case .sessionEnded:
                    session = nil
                    return true
                case .later:
                    return true
                case .refused:
                    break  // refused (too old, say): final
                }
            }
            // `report` may have added (or dropped the oldest) while the batch was out.
            let sent = Set(batch.map(\.clientEventId))
            activity.removeAll { sent.contains($0.clientEventId) }
            try? store.write(Self.activityFile, activity)
        }
        return false
    }
}
