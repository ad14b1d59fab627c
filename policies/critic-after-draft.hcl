# critic-after-draft: a critic step after every draft step. Both versions
# stay loadable: select one with critic-after-draft@1 or @2.

policy "critic-after-draft" {
  version    = 1
  assumption = "A model drafting in one pass leaves placeholders (TODO, TBD, [citation needed]) and empty sections behind, and a check written for the task's structure does not look for them."

  evidence {
    text = "Example only: in plugins/examples/critic the first draft keeps a TODO that the report example's verify step passes; with this policy the critic catches it and the task repairs the draft, at the cost of one critic unit and one more draft unit per pass. No eval with a real model backs this yet."
  }

  insert "critic" {
    after     = "draft*"
    plugin    = "../plugins/examples/critic/critic.wasm"
    input     = { draft = step.anchor.output }
    timeout   = "30s"
    workspace = "none"
    repair {
      restart_from = "anchor"
      max          = 2
    }
  }
}

policy "critic-after-draft" {
  version    = 2
  assumption = "As version 1; models also leave filler such as \"lorem ipsum\" and \"as an AI\" in drafts, so the critic is told which markers to look for."

  evidence {
    text   = "An example eval only, on defects planted by a deterministic plugin, not left by a model: testdata/evals/critic.hcl (make eval-demo) runs the critic example with and without this version. With it, drafts with a planted TODO or TBD pass and a clean draft passes; without it, only the clean draft passes. The cost is one critic unit per draft, and on a planted defect one repair and a second draft and critic. It shows the policy does what it says, not how often a real model leaves placeholders; no eval with a real model backs it yet. The extra markers come from reading drafts, not from an eval."
    result = "../testdata/evals/results/critic-after-draft.json"
  }

  # The markers reach only the critic steps this policy inserts.
  steps  = "critic-after-draft.*"
  params = { markers = ["TODO", "TBD", "XXX", "[citation needed]", "lorem ipsum", "as an AI"] }

  insert "critic" {
    after     = "draft*"
    plugin    = "../plugins/examples/critic/critic.wasm"
    input     = { draft = step.anchor.output }
    timeout   = "30s"
    workspace = "none"
    repair {
      restart_from = "anchor"
      max          = 3
    }
  }
}
