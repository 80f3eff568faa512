import Foundation
import ParleyAPI
import ParleyDomain
import Testing

@testable import ParleyStore

/// The search indexer looks with `searchIndexIsBehind` (a read) before it takes the writer for
/// `indexForSearch` (ParleyServer's `BackgroundWritesTests` count the writes it saves).
@Suite("Whether the search index is behind")
struct SearchIndexStateTests {
    @Test("behind once a message is written, caught up once it is indexed; on PostgreSQL never behind", arguments: Backend.available)
    func behind(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let behind = { try await store.read { repo in try await repo.searchIndexIsBehind() } }
            #expect(try await behind() == false)  // a new database: nothing to index

            let fixture = try await Fixture.make(in: store)
            let conversation = fixture.conversation()
            try await store.write { repo in try await repo.insertConversation(conversation) }
            var written = conversation
            for seq in 1...3 { written = try await fixture.append("parcel \(seq)", to: written, in: store) }
            #expect(try await behind() == (backend == .sqlite))

            // Two rows a batch: the first leaves one behind, the second catches up.
            #expect(try await store.write { repo in try await repo.indexForSearch(limit: 2) } == (backend == .sqlite ? 2 : 0))
            #expect(try await behind() == (backend == .sqlite))
            _ = try await store.write { repo in try await repo.indexForSearch(limit: 2) }
            #expect(try await behind() == false)
        }
    }
}
