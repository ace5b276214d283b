terraform {
  # optional() object attributes and validations that refer to other variables.
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # Written against the 5.x schema (validated with 5.100); nothing used here changed in 6.x.
      version = ">= 5.80, < 7.0"
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = merge({ Application = "wsfleet", Stack = var.name }, var.tags)
  }
}

data "aws_caller_identity" "current" {}
data "aws_region" "current" {}
data "aws_partition" "current" {}
