import Hummingbird
import Logging
import ServiceLifecycle

/// A provider's local stand-in (`FakeWhatsApp`, `FakeMessenger`): a Hummingbird server on an
/// ephemeral port of 127.0.0.1, stopped by `stop()`.
final class LocalEndpoint: Sendable {
    let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(port: Int, group: ServiceGroup, task: Task<Void, any Error>) {
        (self.port, self.group, self.task) = (port, group, task)
    }

    static func start(_ router: Router<BasicRequestContext>, label: String) async -> LocalEndpoint {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: label)
        logger.logLevel = .warning
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: logger))
        let task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        return LocalEndpoint(port: await iterator.next() ?? 0, group: group, task: task)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}
