// The app's own screens as JPEG frames, for screen share in calls from ParleyKit's chat screen
// (issue 29). Only iOS compiles this file (UIKit); CI here builds ParleyKit on Linux, where the
// frame rules (AppScreenFrames) and the page's side (js/app-screen.js, tested in Chromium) run,
// and this file does not: it has not run on a device from this repository's checks.
#if canImport(UIKit) && os(iOS)
import UIKit

/// Draws the app's key window into a JPEG, covering what must never leave the device first:
/// secure text fields, password, one-time-code and card fields, and the views the app marks
/// with `AppScreenCapture.mask(_:)`. No ReplayKit: the app draws its own views, so nothing
/// outside it (other apps, notifications, the keyboard's window) is ever in a frame.
@MainActor
public enum AppScreenCapture {
    /// Views whose content is covered in every frame (weakly held).
    private static let masked = NSHashTable<UIView>.weakObjects()
    /// Frames are drawn at most this wide, in pixels (a phone's width at scale 1).
    public static var maxPixelWidth: CGFloat = 430
    /// JPEG quality of a frame (0-1).
    public static var quality: CGFloat = 0.6

    /// Covers `view` (an account number, an address...) in every shared frame.
    public static func mask(_ view: UIView) { masked.add(view) }

    /// Stops covering `view`.
    public static func unmask(_ view: UIView) { masked.remove(view) }

    /// The key window of the app's active scene, drawn and masked; nil when the app is not in front.
    static func frame() -> Data? {
        let scenes = UIApplication.shared.connectedScenes.compactMap { $0 as? UIWindowScene }
        guard let scene = scenes.first(where: { $0.activationState == .foregroundActive }),
            let window = scene.windows.first(where: { $0.isKeyWindow }) ?? scene.windows.first
        else { return nil }
        let bounds = window.bounds
        guard bounds.width > 0, bounds.height > 0 else { return nil }
        let format = UIGraphicsImageRendererFormat()
        format.scale = min(scene.screen.scale, maxPixelWidth / bounds.width)
        format.opaque = true
        let covers = coveredRects(in: window)
        let image = UIGraphicsImageRenderer(bounds: bounds, format: format).image { context in
            window.drawHierarchy(in: bounds, afterScreenUpdates: false)
            UIColor(white: 0.19, alpha: 1).setFill()
            for rect in covers { context.fill(rect) }
        }
        return image.jpegData(compressionQuality: quality)
    }

    private static let sensitiveContentTypes: Set<UITextContentType> = [
        .password, .newPassword, .oneTimeCode, .creditCardNumber, .creditCardSecurityCode, .creditCardExpiration,
        .creditCardExpirationMonth, .creditCardExpirationYear,
    ]

    /// Where the views to cover are, in the window's coordinates.
    private static func coveredRects(in window: UIWindow) -> [CGRect] {
        var rects: [CGRect] = []
        func visit(_ view: UIView) {
            guard !view.isHidden, view.alpha > 0.01 else { return }
            if covers(view) {
                rects.append(view.convert(view.bounds, to: window))
                return
            }
            for child in view.subviews { visit(child) }
        }
        visit(window)
        return rects
    }

    private static func covers(_ view: UIView) -> Bool {
        if masked.contains(view) { return true }
        if let field = view as? UITextField {
            return field.isSecureTextEntry || field.textContentType.map { sensitiveContentTypes.contains($0) } == true
        }
        if let text = view as? UITextView {
            return text.isSecureTextEntry || text.textContentType.map { sensitiveContentTypes.contains($0) } == true
        }
        return false
    }
}
#endif
