import Foundation
import ParleyServer
import Testing

@Suite("OpenAPI document")
struct OpenAPITests {
    static func documentedRoutes() throws -> Set<String> {
        let url = TestServer.repositoryRoot.appendingPathComponent("openapi.json")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        var routes: Set<String> = []
        for (path, operations) in paths {
            for method in operations.keys where ["get", "post", "put", "patch", "delete"].contains(method) {
                routes.insert("\(method.uppercased()) \(path)")
            }
        }
        return routes
    }

    @Test("every route the server registers is described, and every described route exists")
    func routesMatch() async throws {
        try await TestServer.run { server in
            let registered = Set(
                (buildRouter(server.services).routes + buildWebSocketRouter(server.services).routes)
                    .map { "\($0.method.rawValue) \($0.path.description)" })
            let documented = try Self.documentedRoutes()
            #expect(registered.subtracting(documented).sorted() == [], "registered but not in openapi.json")
            #expect(documented.subtracting(registered).sorted() == [], "in openapi.json but not registered")
            #expect(registered.count > 25)
        }
    }
}
