import Foundation
import TernAPNs
import TernTestSupport
import Testing

@testable import TernServer

/// The contract at `GET /openapi.json` names exactly the routes the server has.
struct OpenAPITests {
    @Test func theDocumentNamesEveryRouteAndNoOther() async throws {
        let server = try await ServerHarness.shared.value
        let answer = try await server.api.get("/openapi.json")
        #expect(answer.status == 200)
        #expect(answer.headers.first(name: "content-type") == "application/json")
        guard case .object(let paths)? = try answer.json()["paths"] else {
            Issue.record("no paths in the document")
            return
        }
        var documented: [String] = []
        for (path, item) in paths {
            guard case .object(let operations) = item else { continue }
            for method in operations.keys { documented.append("\(method.uppercased()) \(path)") }
        }
        let served = server.server.servedRoutes.withLock { $0 }.map { route in
            // The router names parameters as written at registration; the document names them after what they are.
            route.replacingOccurrences(of: "{device}", with: "{deviceId}").replacingOccurrences(of: "{push}", with: "{pushId}")
                .replacingOccurrences(of: "{message}", with: "{messageId}")
        }
        #expect(!served.isEmpty)
        #expect(Set(served).subtracting(documented).sorted() == [], "routes missing from the document")
        #expect(Set(documented).subtracting(served).sorted() == [], "documented routes that do not exist")
    }

    @Test func theDocumentIsOpenAPI31WithEveryReferenceResolved() throws {
        let document = try JSONValue(parsing: Data(OpenAPIDocument.json.utf8))
        #expect(document["openapi"] == "3.1.0")
        let text = OpenAPIDocument.json
        var references = Set<String>()
        var rest = Substring(text)
        while let range = rest.range(of: ##""$ref": "#/components/schemas/"##) {
            rest = rest[range.upperBound...]
            references.insert(String(rest.prefix(while: { $0 != "\"" })))
        }
        guard case .object(let schemas)? = document["components"]?["schemas"] else {
            Issue.record("no schemas")
            return
        }
        #expect(!references.isEmpty)
        #expect(references.subtracting(schemas.keys).sorted() == [], "references to schemas that do not exist")
    }
}
