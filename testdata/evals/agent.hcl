# An ablation eval of the tool-use policies single-tool-at-a-time and
# context-reset-every-n on the agent example (plugins/examples/agent), whose
# plugin reads their parameters. `make eval-demo` runs it:
#
#   lhengine eval testdata/evals/agent.hcl
#
# The model calls are answered from recorded responses (model_replay), so
# nothing is sent and every run has the same conversation. The responses
# are a scripted loopback model's (internal/testmodel, scripted by
# capitalsModel in cmd/lhengine/eval_agent_test.go), not a real model's: it
# asks for every country of the question it has no fact about in one turn,
# one per turn once told that calls were not run, and answers with the
# facts it found. The result shows what each policy costs in cost units
# and that the plugin honours it, not whether a real model needs it.
# Record them again (every case in every state) with
#
#   go test ./cmd/lhengine -run TestEvalAgentSet -update-evals

eval "agent-tool-policies" {
  description = "single-tool-at-a-time and context-reset-every-n on the agent example, each ablated, on recorded responses of a scripted loopback model (not a real model): the figures show what each policy costs in cost units and that the plugin honours it, not whether a real model needs it."

  policies    = ["single-tool-at-a-time@1", "context-reset-every-n@1"]
  policy_dirs = ["../../policies"]
  ablate      = ["single-tool-at-a-time", "context-reset-every-n"]

  # The model asks for both lookups in its first turn. Without
  # single-tool-at-a-time both run and it answers in turn 2; with it the
  # second is refused, asked for again in turn 2, and the answer comes in
  # turn 3, the same answer for more tokens. The conversation is too short
  # for a context reset.
  case "two-capitals" {
    task         = "../../plugins/examples/agent/task.hcl"
    model_replay = "agent/recorded"
    vars = {
      question  = "What are the capitals of Norway and Sweden?"
      max_turns = 8
      facts = {
        Norway  = "Norway's capital is Oslo."
        Sweden  = "Sweden's capital is Stockholm."
        Denmark = "Denmark's capital is Copenhagen."
      }
    }
    verify {
      plugin = "verifiers/agent.wasm"
    }
  }

  # One lookup per turn under single-tool-at-a-time: 25 model turns. With
  # context-reset-every-n (every 20 turns) turn 21 starts from the question
  # and the 20 facts found, without the 20 turns of calls and refusals
  # before it: fewer input tokens for the same answer.
  case "many-capitals" {
    task         = "../../plugins/examples/agent/task.hcl"
    model_replay = "agent/recorded"
    vars = {
      question  = "What are the capitals of Norway, Sweden, Denmark, Finland, Iceland, Estonia, Latvia, Lithuania, Poland, Germany, France, Spain, Portugal, Italy, Austria, Hungary, Greece, Ireland, Belgium, Netherlands, Croatia, Slovenia, Slovakia and Romania?"
      max_turns = 40
      facts = {
        Norway      = "Norway's capital is Oslo."
        Sweden      = "Sweden's capital is Stockholm."
        Denmark     = "Denmark's capital is Copenhagen."
        Finland     = "Finland's capital is Helsinki."
        Iceland     = "Iceland's capital is Reykjavik."
        Estonia     = "Estonia's capital is Tallinn."
        Latvia      = "Latvia's capital is Riga."
        Lithuania   = "Lithuania's capital is Vilnius."
        Poland      = "Poland's capital is Warsaw."
        Germany     = "Germany's capital is Berlin."
        France      = "France's capital is Paris."
        Spain       = "Spain's capital is Madrid."
        Portugal    = "Portugal's capital is Lisbon."
        Italy       = "Italy's capital is Rome."
        Austria     = "Austria's capital is Vienna."
        Hungary     = "Hungary's capital is Budapest."
        Greece      = "Greece's capital is Athens."
        Ireland     = "Ireland's capital is Dublin."
        Belgium     = "Belgium's capital is Brussels."
        Netherlands = "The capital of the Netherlands is Amsterdam."
        Croatia     = "Croatia's capital is Zagreb."
        Slovenia    = "Slovenia's capital is Ljubljana."
        Slovakia    = "Slovakia's capital is Bratislava."
        Romania     = "Romania's capital is Bucharest."
      }
    }
    verify {
      plugin = "verifiers/agent.wasm"
    }
  }
}
