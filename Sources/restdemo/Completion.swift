// `restdemo completion bash|zsh|fish`: shell completion scripts made from the command table.

import Foundation

enum Completion {
    static let shells = ["bash", "zsh", "fish"]

    static func script(for shell: String) throws -> String {
        switch shell {
        case "bash": return bash
        case "zsh": return zsh
        case "fish": return fish
        default: throw UsageError(message: "SHELL must be bash, zsh or fish, not '\(shell)'", command: "completion")
        }
    }

    private static var globalOptions: [String] {
        (ArgumentParser.globalValueOptions.union(ArgumentParser.globalFlags)).filter { $0.hasPrefix("--") }.sorted()
    }

    private static func options(_ spec: CommandSpec) -> [String] { spec.valueOptions + spec.flags }

    private static var bash: String {
        let cases = Commands.all.map { spec in
            let words = (options(spec) + (spec.name == "completion" ? shells : [])).joined(separator: " ")
            return "    \(spec.name)) words=\"\(words) $globals\" ;;"
        }.joined(separator: "\n")
        return """
            # bash completion for restdemo: source it, or save it as /etc/bash_completion.d/restdemo
            _restdemo() {
              local cur="${COMP_WORDS[COMP_CWORD]}" command="" word words globals="\(globalOptions.joined(separator: " "))"
              for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
                case "$word" in -*) ;; *) command="$word"; break ;; esac
              done
              case "$command" in
                "") words="\(Commands.all.map(\.name).joined(separator: " ")) $globals" ;;
            \(cases)
                *) words="$globals" ;;
              esac
              COMPREPLY=($(compgen -W "$words" -- "$cur"))
            }
            complete -F _restdemo restdemo
            """
    }

    private static var zsh: String {
        let commands = Commands.all.map { "    '\($0.name):\($0.summary.replacingOccurrences(of: "'", with: ""))'" }.joined(separator: "\n")
        let cases = Commands.all.map { spec in
            let words = (options(spec) + (spec.name == "completion" ? shells : []) + globalOptions).joined(separator: " ")
            return "    \(spec.name)) compadd -- \(words) ;;"
        }.joined(separator: "\n")
        return """
            #compdef restdemo
            # zsh completion for restdemo: save it as _restdemo in a folder of your $fpath
            _restdemo() {
              local -a commands
              commands=(
            \(commands)
              )
              if (( CURRENT == 2 )); then
                _describe 'command' commands
                compadd -- \(globalOptions.joined(separator: " "))
                return
              fi
              case $words[2] in
            \(cases)
              esac
            }
            _restdemo "$@"
            """
    }

    private static var fish: String {
        var lines = [
            "# fish completion for restdemo: save it as ~/.config/fish/completions/restdemo.fish",
            "complete -c restdemo -f"
        ]
        for option in globalOptions { lines.append("complete -c restdemo -l \(option.dropFirst(2))") }
        for spec in Commands.all {
            lines.append("complete -c restdemo -n __fish_use_subcommand -a \(spec.name) -d '\(spec.summary.replacingOccurrences(of: "'", with: ""))'")
            for option in options(spec) {
                let takesValue = spec.valueOptions.contains(option) ? " -r" : ""
                lines.append("complete -c restdemo -n '__fish_seen_subcommand_from \(spec.name)' -l \(option.dropFirst(2))\(takesValue)")
            }
            if spec.name == "completion" {
                lines.append("complete -c restdemo -n '__fish_seen_subcommand_from completion' -a '\(shells.joined(separator: " "))'")
            }
        }
        return lines.joined(separator: "\n")
    }
}
