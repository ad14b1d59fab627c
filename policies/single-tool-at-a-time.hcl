policy "single-tool-at-a-time" {
  version    = 1
  assumption = "Models that call several tools in one turn misorder dependent calls and lose results; calling one tool per turn avoids that at the cost of more turns."

  evidence {
    text   = "An example eval only, on recorded responses of a scripted loopback model, not a real model: testdata/evals/agent.hcl (make eval-demo) runs the agent example (plugins/examples/agent), which reads single_tool, with and without this policy. The scripted model asks for every lookup it needs in one turn; with the policy the plugin runs the first and answers the others that they were not run, so the same correct answers take more turns (3 instead of 2 for two lookups, 25 instead of 2 for 24) and about 17 times the cost units. It shows what the policy costs and that the plugin honours it, not whether a real model misorders parallel calls; no eval with a real model backs it yet. Plugins that drive a model read the single_tool parameter (sdk.Context.Policy.Bool, lhengine_policy_bool)."
    result = "../testdata/evals/results/agent-tool-policies.json"
  }

  params = { single_tool = true }
}
