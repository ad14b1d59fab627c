# An ablation eval of the critic-after-draft policy on the critic example
# (plugins/examples/critic): its draft plugin plants a placeholder in the
# first draft when the case asks for one, which the report example's verify
# step does not look for. `make eval-demo` runs it:
#
#   lhengine eval testdata/evals/critic.hcl
#
# The defects are planted by a deterministic example plugin, not left by a
# model: the result shows what the policy does to such drafts (it catches
# them, at the cost of more units), not how often a real model leaves them.

eval "critic-after-draft" {
  description = "critic-after-draft@2 on the critic example: drafts with a planted TODO or TBD, a clean draft, and a crash in the middle of a repair. The placeholders are planted by an example plugin, not left by a model."

  policies    = ["critic-after-draft@2"]
  policy_dirs = ["../../policies"]
  ablate      = ["critic-after-draft"]

  case "planted-todo" {
    task = "../../plugins/examples/critic/task.hcl"
    vars = { plant = "TODO" }
    verify {
      output_excludes = ["TODO", "TBD"]
    }
  }

  # Judged by a verifier plugin, run by the engine on the case's output.
  case "planted-tbd" {
    task = "../../plugins/examples/critic/task.hcl"
    vars = { topic = "work queues", plant = "TBD" }
    verify {
      plugin = "verifiers/report.wasm"
    }
  }

  case "clean-draft" {
    task = "../../plugins/examples/critic/task.hcl"
    vars = { plant = "" }
    verify {
      output_includes = ["## Findings"]
      output_excludes = ["TODO", "TBD"]
    }
  }

  # Killed (SIGKILL) right after its second commit: with the policy that is
  # the critic's repair, without it the verify step. Resumed, it must end
  # with the uncrashed run's output, no committed unit run again.
  case "crash-after-second-commit" {
    task  = "../../plugins/examples/critic/task.hcl"
    vars  = { plant = "TODO" }
    crash = "unit.after_commit@2"
    verify {
      output_excludes = ["TODO"]
    }
  }
}
