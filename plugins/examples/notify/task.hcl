# Send one "email" per recipient to a mail sink on loopback, exactly once
# each, even if the engine is killed between a send and its record.
#
# From the module root:
#   make notify-demo
# which builds the plugin, starts the sink on a free loopback port
# (./bin/mailsink -addr 127.0.0.1:0 -addr-file FILE), runs this task with
# --var sink=http://ADDRESS/mail, and prints what the sink received.

task "notify" {
  objective   = "Tell every recipient that the report is ready"
  constraints = ["one email per recipient, never two"]

  # The sink's URL: no default, since the sink's port is picked when it starts.
  variable "sink" {
    type = string
  }
  variable "recipients" {
    type    = list(string)
    default = ["ana@example.org", "bo@example.org", "cy@example.org"]
  }

  step "send" {
    plugin      = "send.wasm"
    for_each    = var.recipients
    concurrency = 2
    input = {
      to      = each.value
      subject = "Your report is ready"
      body    = "The durable-execution report finished; see the artifacts."
      sink    = var.sink
    }
    effect "http" {
      hosts = ["127.0.0.1:*"]
      mode  = "resend"
    }
    retry {
      attempts = 3
      backoff  = "100ms"
    }
  }
}
