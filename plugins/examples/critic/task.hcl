# The critic example: a draft whose first pass leaves a "TODO" in its
# Findings, which the report example's verify step does not look for. Run
# as it is, the TODO ships in the final text. With the critic-after-draft
# policy, a critic step
# runs after the draft, finds the placeholder and sends the task back to the
# draft, whose repair pass writes the finished text:
#
#   make plugins    # the report example's verify and finalize
#   for p in critic draft; do
#     GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/critic/$p.wasm ./plugins/examples/critic/$p
#   done
#   lhengine run plugins/examples/critic/task.hcl                     # TODO shipped
#   lhengine run plugins/examples/critic/task.hcl \
#     --policies policies --policy critic-after-draft                 # TODO caught
#   lhengine manifest ID                                              # the pinned policy

task "critic-report" {
  objective = "Write a short report on a topic, with no placeholder left in it"

  variable "topic" {
    type    = string
    default = "durable execution"
  }

  # The placeholder the draft's first pass leaves behind; "" for a clean
  # first draft (the eval set testdata/evals/critic.hcl runs both).
  variable "plant" {
    type    = string
    default = "TODO"
  }

  step "draft" {
    plugin = "draft.wasm"
    input  = { topic = var.topic, plant = var.plant }
  }

  step "verify" {
    plugin = "../report/verify.wasm"
    input  = step.draft.output
  }

  step "finalize" {
    plugin = "../report/finalize.wasm"
    input  = { draft = step.draft.output, verdict = step.verify.output }
  }
}
