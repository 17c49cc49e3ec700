"""The control plane (semantics section 4): query commands on `juggler.control`, their
outcomes on `juggler.control.status`, and the `juggler query` commands that use them."""
