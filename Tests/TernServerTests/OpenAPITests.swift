import Foundation
import TernAPNs
import TernTestSupport
import Testing

@testable import TernServer

/// The contract at `GET /openapi.json` names exactly the routes the server has.
struct OpenAPITests {
    @Test func theDocumentNamesEveryRouteAndNoOther() async throws {
        let server = try await RouterHarness.shared.value
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
        let served = server.servedRoutes.map { route in
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
        var resolved = 0
        for kind in ["schemas", "parameters", "responses"] {
            guard case .object(let defined)? = document["components"]?[kind] else {
                Issue.record("no components.\(kind)")
                continue
            }
            var rest = Substring(OpenAPIDocument.json)
            let marker = "\"#/components/\(kind)/"
            while let range = rest.range(of: marker) {
                rest = rest[range.upperBound...]
                let name = String(rest.prefix(while: { $0 != "\"" }))
                #expect(defined[name] != nil, "#/components/\(kind)/\(name) is not defined")
                resolved += 1
            }
        }
        #expect(resolved > 50)
    }
}
