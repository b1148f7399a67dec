#!/bin/bash
#PBS -l nodes=1:ppn=x
echo "never submitted"
