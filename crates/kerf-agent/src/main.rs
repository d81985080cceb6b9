fn main() {
    print!("{}", kerf_api::crds_yaml().unwrap());
}
