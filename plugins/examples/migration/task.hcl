# A code migration that outlives its operator: rename an old API across a git
# repository, check the result, change the deploy configuration once a person
# approves, and keep the evidence. The repository may move while the task
# waits for that person; the task notices and redoes what the move made stale.
#
# The repository is the folder "repo" beside this file (facts and mounts are
# fixed when the task is submitted, so it is a constant path). The task never
# writes to it: the changed files go to the task's workspace.
#
# From the module root:
#   make migration-demo
# which builds the plugins, copies them and this file into a temporary folder
# beside a git repository it creates from testdata/repo, and walks the task
# through two approvals and a commit that lands while it waits (demo.sh).

task "migration" {
  objective   = "Replace the OldClient API with NewClient and move the deploy config to client 2.0.0"
  constraints = ["never write to the repository: changes go to the workspace", "change deploy.yaml only with a person's approval"]

  variable "old" {
    type    = string
    default = "OldClient"
  }
  variable "new" {
    type    = string
    default = "NewClient"
  }

  # HEAD is read at submit and before every unit. A commit that lands while
  # the task waits (for the approval, say) sends it back to rename: the files
  # are converted again from the new HEAD, checked again, and the deploy
  # change asked again. The plan keeps the HEAD it was made against.
  environment {
    fact "head" { git_head = "repo" }
    on_drift = "restart:rename"
  }

  step "plan" {
    plugin    = "plan.wasm"
    input     = { old = var.old, new = var.new, ext = ".go" }
    workspace = "none"
    mount "repo" { source = "repo" }
  }

  # One unit per file: reads /mnt/repo/FILE, writes /workspace/FILE.
  step "rename" {
    plugin      = "rename.wasm"
    for_each    = step.plan.output.files
    concurrency = 4
    input       = { file = each.value, old = var.old, new = var.new }
    mount "repo" { source = "repo" }
  }

  step "check" {
    plugin    = "check.wasm"
    input     = { files = [for r in step.rename.output : r.file], old = var.old, ext = ".go" }
    workspace = "ro"
    mount "repo" { source = "repo" }
  }

  # Asks a person (approval.request) with the diff as the subject; runs
  # again from the start once they decided.
  step "deploy-config" {
    plugin = "deploy.wasm"
    input  = { file = "deploy.yaml", key = "client_version", value = "2.0.0" }
    mount "repo" { source = "repo" }
  }

  step "evidence" {
    plugin    = "evidence.wasm"
    workspace = "none"
    input = {
      plan    = step.plan.output
      renamed = step.rename.output
      check   = step.check.output
      deploy  = step.deploy-config.output
    }
  }
}
