//! The pure decision core of the Kerf agent.
