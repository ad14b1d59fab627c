policy "single-tool-at-a-time" {
  version    = 1
  assumption = "Models that call several tools in one turn misorder dependent calls and lose results; calling one tool per turn avoids that at the cost of more turns."

  evidence {
    text = "None yet: no eval backs this policy. Plugins that drive a model read the single_tool parameter (sdk.Context.Policy.Bool, lhengine_policy_bool) and ask for one tool call per turn."
  }

  params = { single_tool = true }
}
