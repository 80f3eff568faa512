import Foundation
import ParleyAPI
import ParleyDomain
@testable import ParleyServer
import Testing

@Suite("Brand settings: one owner")
struct BrandSettingsTests {
    @Test("only BrandSettingsService writes brand settings, and only BrandSettingsController routes /v1/brand")
    func oneOwner() throws {
        let sources = try ErrorCatalogueTests.sources(under: "Sources", ending: ".swift")
        let writers = sources.filter { $0.text.contains("saveBrandSettings(") && !$0.path.hasPrefix("Sources/ParleyStore/") }.map(\.path)
        #expect(writers == ["Sources/ParleyServer/Services/BrandSettingsService.swift"])
        let routers = sources.filter { $0.text.contains("\"/v1/brand/") }.map(\.path)
        #expect(routers == ["Sources/ParleyServer/Controllers/BrandSettingsController.swift"])
    }

    @Test("agents read, admins change; a change with one bad field changes nothing; every group of settings in one request")
    func readAndChange() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (agentToken, _) = try await acme.agent()
            let before = try await server.get("/v1/brand/settings", token: agentToken).decode(BrandSettingsDTO.self)
            #expect(before.widgetColor == BrandSettingsDTO.defaultWidgetColor && !before.screenShareFromConsumers)

            let refused = try await server.request(.patch, "/v1/brand/settings", token: agentToken, json: UpdateBrandSettingsRequest(voiceMaxSeconds: 30))
            #expect(refused.status == .forbidden)
            // Valid voice and colour, an invalid co-browse selector: refused as a whole.
            let partly = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken,
                json: UpdateBrandSettingsRequest(voiceMaxSeconds: 30, widgetColor: "#112233", cobrowseMaskSelectors: ["a{}"]))
            #expect(partly.status == .badRequest || partly.status == .unprocessableContent)
            #expect(try partly.error.field == "cobrowseMaskSelectors")
            #expect(try await server.get("/v1/brand/settings", token: agentToken).decode(BrandSettingsDTO.self) == before)

            let changed = try await server.request(
                .patch, "/v1/brand/settings", token: acme.adminToken,
                json: UpdateBrandSettingsRequest(
                    voiceMaxSeconds: 30, cardMasking: .agents, widgetColor: "#AABBCC", previewOrigins: ["https://Shop.Acme.test"],
                    cobrowseEnabled: false, cobrowseMaskSelectors: ["#iban"], screenShareFromConsumers: true)
            ).decode(BrandSettingsDTO.self)
            #expect(changed.voiceMaxSeconds == 30 && changed.cardMasking == .agents && changed.widgetColor == "#aabbcc")
            #expect(changed.previewOrigins == ["https://shop.acme.test"] && !changed.cobrowseEnabled && changed.cobrowseMaskSelectors == ["#iban"])
            #expect(changed.screenShareFromConsumers)
            #expect(try await server.get("/v1/brand/settings", token: agentToken).decode(BrandSettingsDTO.self) == changed)
        }
    }

    @Test("a change is read, applied and written in one transaction: one that fails half-way writes nothing")
    func changeIsAtomic() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let service = server.services.brandSettings
            let before = try await service.settings(brandId: acme.brand.id)
            struct HalfWay: Error {}
            await #expect(throws: HalfWay.self) {
                try await service.change(brandId: acme.brand.id) { settings in
                    settings.widgetColor = "#000000"
                    throw HalfWay()
                }
            }
            #expect(try await service.settings(brandId: acme.brand.id) == before)
            let (written, previous) = try await service.change(brandId: acme.brand.id) { settings -> String in
                defer { settings.availableText = "Back soon" }
                return settings.availableText
            }
            #expect(previous == before.availableText && written.availableText == "Back soon")
            #expect(try await service.settings(brandId: acme.brand.id).availableText == "Back soon")
        }
    }
}
