"""Model updates on top: the agent's side, install/switch/rollback, the gate, push, the model commands."""
