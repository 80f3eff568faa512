// swift-tools-version:6.0
// A brand's app as it adds ParleyKit: here by path; from a release, by its URL and version:
//     .package(url: "https://github.com/parley/ParleyKit.git", exact: "0.4.0")  // released by scripts/sdk-release.sh
// scripts/sdk-check.sh resolves and builds it: the app gets ParleyKit and swift-crypto, nothing else.
import PackageDescription

let package = Package(
    name: "ShopApp",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [.library(name: "ShopChat", targets: ["ShopChat"])],
    dependencies: [.package(path: "../../ParleyKit")],
    targets: [
        .target(name: "ShopChat", dependencies: [.product(name: "ParleyKit", package: "ParleyKit")]),
    ],
    swiftLanguageModes: [.v6]
)
