fn main() -> Result<(), serde_json::Error> {
    print!("{}", kerf_api::crds_yaml()?);
    Ok(())
}
