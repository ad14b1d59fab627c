# The draft -> verify -> finalize example: verify finds the first draft
# lacking a "Risks" section and asks for a repair, the task goes back to
# draft, whose second pass (repair count 1) includes it, and verify passes.
#
# Build the plugins first, from the module root:
#
#   for s in draft verify finalize; do
#     GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/report/$s.wasm ./plugins/examples/report/$s
#   done
#   lhengine run plugins/examples/report/task.hcl

task "report" {
  objective = "Write a short report on a topic and check it"

  variable "topic" {
    type    = string
    default = "durable execution"
  }

  step "draft" {
    plugin = "draft.wasm"
    input  = { topic = var.topic }
  }

  step "verify" {
    plugin = "verify.wasm"
    input  = step.draft.output
    repair {
      restart_from = "draft"
      max          = 2
    }
  }

  step "finalize" {
    plugin = "finalize.wasm"
    input  = { draft = step.draft.output, verdict = step.verify.output }
  }
}
