import Foundation
import MockServer
let server = MockServer()
try server.start()
FileHandle.standardOutput.write(Data("\(server.baseURL)\n".utf8))
dispatchMain()
