# One task, four languages: each step is a plugin written with another of
# lhengine's SDKs, and each reads the output of the one before it.
#
#   words    Go              the text's words
#   lengths  Rust            the length of each word
#   stats    AssemblyScript  their total and the longest
#   report   C               one line of text, and a note of it
#
# From the module root: make polyglot-demo (builds the four plugins, then
# runs this task in a temporary home and prints its output).

task "polyglot" {
  objective = "Describe a text's words, one step per plugin language"

  variable "text" {
    type    = string
    default = "Every step of this task is a WebAssembly plugin, each written in another language."
  }

  step "words" {
    plugin = "words.wasm"
    input  = { text = var.text }
  }

  step "lengths" {
    plugin = "lengths.wasm"
    input  = { words = step.words.output.words }
  }

  step "stats" {
    plugin = "stats.wasm"
    input  = { lengths = step.lengths.output.lengths }
  }

  step "report" {
    plugin = "report.wasm"
    input = {
      words   = length(step.words.output.words)
      letters = step.stats.output.total
      longest = step.stats.output.longest
      langs   = [step.words.output.lang, step.lengths.output.lang, step.stats.output.lang, "c"]
    }
  }
}
