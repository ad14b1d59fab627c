policy "context-reset-every-n" {
  version    = 1
  assumption = "A model's answers degrade as its context fills over a long run; starting a fresh context from the durable handoff every N turns keeps them steady."

  evidence {
    text = "None yet: no eval backs this policy or the value 20. Plugins that keep a model conversation read context_reset_every (sdk.Context.Policy.Int, lhengine_policy_int) and rebuild the context from the handoff after that many turns."
  }

  params = { context_reset_every = 20 }
}
