"""Settings: the structured schemas Hydra validates every command's config against (`schema`,
`commands`) and the rules that tie settings together (`checks`)."""
