import Foundation

/// The notifications that say an app came to the foreground or went to the background.
public struct AppLifecycle: Sendable {
    public var center: NotificationCenter
    public var foreground: Notification.Name
    public var background: Notification.Name

    public init(center: NotificationCenter = .default, foreground: Notification.Name, background: Notification.Name) {
        self.center = center
        self.foreground = foreground
        self.background = background
    }

    /// UIKit's (iOS, iPadOS, tvOS, visionOS): `UIApplication.willEnterForegroundNotification` and
    /// `didEnterBackgroundNotification`, by their names (so nothing here needs UIKit).
    public static var uiKit: AppLifecycle {
        AppLifecycle(
            foreground: Notification.Name("UIApplicationWillEnterForegroundNotification"),
            background: Notification.Name("UIApplicationDidEnterBackgroundNotification"))
    }
}

extension Parley {
    /// Follows the app's lifecycle: in the foreground the real-time connection is open and the outbox
    /// sends; in the background the connection closes (the agents' answers come as push
    /// notifications) and the outbox keeps sending for as long as the system lets the app run.
    /// Call it once, with the app in the foreground; an app that shows the conversation only on
    /// some screens calls `connect()` and `disconnect()` itself instead.
    public func followAppLifecycle(_ lifecycle: AppLifecycle = .uiKit) {
        guard lifecycleTask == nil else { return }
        let (changes, continuation) = AsyncStream.makeStream(of: Bool.self)
        // One stream, read by one task: a quick background-foreground pair is handled in order.
        lifecycleObservers = [
            lifecycle.center.addObserver(forName: lifecycle.foreground, object: nil, queue: nil) { _ in continuation.yield(true) },
            lifecycle.center.addObserver(forName: lifecycle.background, object: nil, queue: nil) { _ in continuation.yield(false) },
        ]
        lifecycleCenter = lifecycle.center
        lifecycleTask = Task {
            for await foreground in changes {
                self.appMoved(toForeground: foreground)
            }
        }
        appMoved(toForeground: true)
    }

    /// Stops following the app's lifecycle (the connection and outbox stay as they are).
    public func stopFollowingAppLifecycle() {
        for observer in lifecycleObservers { lifecycleCenter?.removeObserver(observer) }
        lifecycleObservers = []
        lifecycleTask?.cancel()
        lifecycleTask = nil
    }

    private func appMoved(toForeground foreground: Bool) {
        if foreground {
            start()
            connect()
        } else {
            disconnect()
        }
    }
}
