policy "context-reset-every-n" {
  version    = 1
  assumption = "A model's answers degrade as its context fills over a long run; starting a fresh context from the durable handoff every N turns keeps them steady."

  evidence {
    text   = "An example eval only, on recorded responses of a scripted loopback model, not a real model: testdata/evals/agent.hcl (make eval-demo) runs the agent example (plugins/examples/agent), which reads context_reset_every, with single-tool-at-a-time and with and without this policy. On a 25-turn conversation (24 lookups, one per turn) the reset after turn 20 restarts it from the question and the 20 facts found: the same answer for about 17% fewer input tokens (16% fewer cost units). A scripted model's answers do not degrade as its context fills, so the eval shows what a reset saves and that the plugin honours it, not whether a real model needs it, nor that 20 is the right value; no eval with a real model backs it yet. Plugins that keep a model conversation read context_reset_every (sdk.Context.Policy.Int, lhengine_policy_int) and rebuild the context from the handoff after that many turns."
    result = "../testdata/evals/results/agent-tool-policies.json"
  }

  params = { context_reset_every = 20 }
}
