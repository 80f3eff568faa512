// The drop-in conversation screen: the widget, tested in Chromium and WebKit, in its app mode, in a
// WKWebView. Only Apple platforms compile this file (WebKit, SwiftUI, UIKit/AppKit); CI here builds
// ParleyKit on Linux, where it is left out, so it stays thin: everything it does is hand the page
// the SDK's session and let the system grant the microphone and camera to the brand's server.
#if canImport(WebKit) && canImport(SwiftUI) && (os(iOS) || os(macOS) || os(visionOS))
import SwiftUI
import WebKit

/// Hosts the widget in app mode (`widget.html?app=…&mode=app`) for one `Parley`: the page asks
/// for the session on the `parley` script message handler (`ready`, or `sessionExpired` when the
/// server refused it) and gets the SDK's through `parleyApp.start({ token })`, never in a URL.
/// Voice notes, attachments, calls and the survey are the page's; the brand's colours come from
/// its settings in Parley.
@MainActor
public final class ParleyChatHost: NSObject, WKNavigationDelegate, WKUIDelegate {
    public let webView: WKWebView
    private let parley: Parley

    public init(parley: Parley) {
        self.parley = parley
        let configuration = WKWebViewConfiguration()
        #if os(iOS) || os(visionOS)
        configuration.allowsInlineMediaPlayback = true
        configuration.mediaTypesRequiringUserActionForPlayback = []
        #endif
        let controller = WKUserContentController()
        configuration.userContentController = controller
        webView = WKWebView(frame: .zero, configuration: configuration)
        super.init()
        // The controller keeps its handlers: a weak hop avoids keeping this host for ever.
        controller.add(WeakMessageHandler(self), name: "parley")
        webView.navigationDelegate = self
        webView.uiDelegate = self
        #if os(iOS) || os(visionOS)
        // The page pads itself by the safe areas (env(safe-area-inset-*)).
        webView.scrollView.contentInsetAdjustmentBehavior = .never
        #endif
        var components = URLComponents(url: parley.server.appendingPathComponent("widget.html"), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "app", value: parley.appID.rawValue), URLQueryItem(name: "mode", value: "app")]
        if let url = components?.url { webView.load(URLRequest(url: url)) }
    }

    func received(_ body: Any) {
        guard let message = body as? [String: Any], let type = message["type"] as? String else { return }
        switch type {
        case "ready": Task { await handOver(renew: false) }
        case "sessionExpired": Task { await handOver(renew: true) }
        #if os(iOS)
        case "screenShare.start": startSharing(framesPerSecond: message["framesPerSecond"] as? Int)
        case "screenShare.stop": stopSharing(tellPage: nil)
        #endif
        default: break
        }
    }

    /// Whether the app can share its own screens in calls (AppScreenCapture: iOS).
    #if os(iOS)
    static let sharesScreens = true
    #else
    static let sharesScreens = false
    #endif

    #if os(iOS)
    /// The app shares its own screens in a call (issue 29): frames until the page says stop, the
    /// app leaves the foreground, or the page cannot take them.
    private var sharing: Task<Void, Never>?
    private var backgroundObserver: (any NSObjectProtocol)?

    private func startSharing(framesPerSecond: Int?) {
        // A share already running ends first: its loop and its background observer.
        stopSharing(tellPage: nil)
        let interval = AppScreenFrames.interval(framesPerSecond: framesPerSecond)
        sharing = Task { [weak self] in
            var frames = AppScreenFrames()
            while !Task.isCancelled {
                guard let webView = self?.webView else { return }
                if let jpeg = AppScreenCapture.frame(), let script = frames.script(for: jpeg, at: .now) {
                    // `screenFrame` returns a boolean: the async evaluateJavaScript needs a value back.
                    do { _ = try await webView.evaluateJavaScript(script) } catch { return }  // the page went away
                }
                try? await Task.sleep(for: interval)
            }
        }
        // iOS draws nothing for an app in the background: the share ends, and the call goes on.
        backgroundObserver = NotificationCenter.default.addObserver(
            forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: .main
        ) { [weak self] _ in
            MainActor.assumeIsolated { self?.stopSharing(tellPage: "stopped") }
        }
    }

    private func stopSharing(tellPage reason: String?) {
        sharing?.cancel()
        sharing = nil
        if let backgroundObserver { NotificationCenter.default.removeObserver(backgroundObserver) }
        backgroundObserver = nil
        if let reason { webView.evaluateJavaScript("parleyApp.screenShareEnded(\"\(reason)\")") }
    }
    #endif

    private func handOver(renew: Bool) async {
        for attempt in 0..<6 {
            do {
                let token = renew ? try await parley.renewSessionToken() : try await parley.sessionToken()
                let session: [String: Any] = ["token": token, "screenShare": Self.sharesScreens]
                let json = String(decoding: try JSONSerialization.data(withJSONObject: session), as: UTF8.self)
                _ = try await webView.evaluateJavaScript("parleyApp.start(\(json))")
                return
            } catch {
                // No network yet: the page says it is connecting; try again shortly.
                try? await Task.sleep(for: .seconds(2 << min(attempt, 4)))
            }
        }
    }

    /// The microphone and camera for the brand's own server (voice notes, calls); the system asks
    /// the user once (the app's Info.plist needs NSMicrophoneUsageDescription and
    /// NSCameraUsageDescription).
    public func webView(
        _ webView: WKWebView, requestMediaCapturePermissionFor origin: WKSecurityOrigin, initiatedByFrame frame: WKFrameInfo,
        type: WKMediaCaptureType
    ) async -> WKPermissionDecision {
        origin.host == parley.server.host ? .prompt : .deny
    }

    /// Links to other sites open in the browser, not in the chat.
    public func webView(_ webView: WKWebView, decidePolicyFor navigationAction: WKNavigationAction) async -> WKNavigationActionPolicy {
        guard navigationAction.navigationType == .linkActivated, let url = navigationAction.request.url, url.host != parley.server.host else {
            return .allow
        }
        #if os(macOS)
        NSWorkspace.shared.open(url)
        #else
        await UIApplication.shared.open(url)
        #endif
        return .cancel
    }
}

/// Holds the host weakly for WKUserContentController, which keeps its handlers strongly.
private final class WeakMessageHandler: NSObject, WKScriptMessageHandler {
    weak var host: ParleyChatHost?

    init(_ host: ParleyChatHost) { self.host = host }

    @MainActor
    func userContentController(_ controller: WKUserContentController, didReceive message: WKScriptMessage) {
        host?.received(message.body)
    }
}

/// The conversation screen in one line of SwiftUI: `ParleyChatView(parley: parley)`.
public struct ParleyChatView: View {
    private let parley: Parley

    public init(parley: Parley) { self.parley = parley }

    public var body: some View {
        ChatWebView(parley: parley).ignoresSafeArea(.container)
    }
}

#if os(macOS)
private struct ChatWebView: NSViewRepresentable {
    let parley: Parley
    func makeCoordinator() -> ParleyChatHost { ParleyChatHost(parley: parley) }
    func makeNSView(context: Context) -> WKWebView { context.coordinator.webView }
    func updateNSView(_ view: WKWebView, context: Context) {}
}
#else
private struct ChatWebView: UIViewRepresentable {
    let parley: Parley
    func makeCoordinator() -> ParleyChatHost { ParleyChatHost(parley: parley) }
    func makeUIView(context: Context) -> WKWebView { context.coordinator.webView }
    func updateUIView(_ view: WKWebView, context: Context) {}
}

/// The conversation screen for UIKit: push or present `ParleyChatViewController(parley: parley)`.
public final class ParleyChatViewController: UIViewController {
    private let host: ParleyChatHost

    public init(parley: Parley) {
        host = ParleyChatHost(parley: parley)
        super.init(nibName: nil, bundle: nil)
    }

    @available(*, unavailable)
    required init?(coder: NSCoder) { fatalError("init(coder:) is not supported") }

    public override func loadView() { view = host.webView }
}
#endif
#endif
